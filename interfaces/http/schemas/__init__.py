"""Request and response schemas of the HTTP API, one module per router."""
