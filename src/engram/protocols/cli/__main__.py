"""``python -m engram.protocols.cli`` runs the ``engram`` command."""

from engram.protocols.cli.main import main

main()
