"""``python -m gnngp_cli``: the same as the ``gnngp`` command."""
from .cli import main

main()
