"""``python -m bench``: see :mod:`bench.run`; ``python -m bench --only llama``: see :mod:`bench.llama`."""

import sys

if sys.argv[1:3] == ["--only", "llama"]:
    from bench.llama import main as llama_main

    llama_main(sys.argv[3:])
else:
    from bench.run import main

    main()
