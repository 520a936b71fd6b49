"""``python -m gnngp_cli.cli``: the same as the ``gnngp`` command."""
from .main import main

main()
