"""HTTP routers of the brain app: page tools, memory verbs and push context."""
