"""API schemas of the brain app, one module per router (pages, verbs, push)."""
