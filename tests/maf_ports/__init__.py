"""Agent Framework's sub-workflow samples, ported to this library, with the output Agent Framework prints for them."""
