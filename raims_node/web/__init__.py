"""The web transport: admin JSON, health, metrics, websocket pub/sub."""
