"""``python -m bench``: see :mod:`bench.run`; ``--only llama-runtime``: :mod:`bench.llama_runtime`."""

import sys

if sys.argv[1:3] == ["--only", "llama-runtime"]:
    from bench.llama_runtime import main as llama_runtime_main

    llama_runtime_main(sys.argv[3:])
else:
    from bench.run import main

    main()
