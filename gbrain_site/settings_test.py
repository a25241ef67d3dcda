"""Test settings: the real settings with speed knobs only (STYLE rule 20)."""

from gbrain_site.settings import *  # noqa: F403
from gbrain_site.settings import Q_CLUSTER

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
Q_CLUSTER = {**Q_CLUSTER, "sync": True}
# Tests fake Anthropic at the HTTP layer; a developer's real key must never be used.
ANTHROPIC_API_KEY = ""
# The test process runs the ASGI app's lifespan many times (in-process HTTP and MCP
# tests) and keeps using the database afterwards: a lifespan shutdown is not the end
# of this process, so it must not give up the embedded server (gbrain_site.asgi).
BRAIN_EMBEDDED_RELEASE_ON_SHUTDOWN = False
# The learned decision (SPEC §5.1b) is tested on its own (tests/loops/test_decisions.py
# calls it directly); the rule tests see the rules' candidates.
LOOPS_DECISIONS_ENABLED = False
