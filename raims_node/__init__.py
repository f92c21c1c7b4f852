"""raims: the Rai MS link-state publish/subscribe network in Python.

Layers (see docs/DESIGN-NOTES.md and ../shared/DESIGN.md): wire, crypto, config,
subject, bloom, linkstate, router (sans-IO), transports, bridges, console, web.
"""

__version__ = "0.1.0"


class RaimsError(Exception):
    """Root of every error raised by raims_node."""
