"""Transports: asyncio adapters between sockets and the sans-IO router node."""
