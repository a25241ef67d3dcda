"""HTTP transport: the one NinjaAPI, its routers (one module per area) and schemas."""
