"""`python -m patchgym` is the same as the `patchgym` console script."""

from patchgym.main import main

main()
