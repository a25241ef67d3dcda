"""Settings for a real ``qcluster`` subprocess started by tests.

The real settings (not the test ones: the worker must not run tasks synchronously),
with ``DATABASE_URL`` pointing at the test database, one worker, fast polling, a
1-second heartbeat, and the test-only job kinds.
"""

from gbrain_site.settings import *  # noqa: F403
from gbrain_site.settings import Q_CLUSTER
from tests.jobs.kinds import TEST_KINDS

Q_CLUSTER = {
    **Q_CLUSTER,
    "workers": 1,
    "poll": 0.1,
    "timeout": 120,
    "retry": 300,
    "sync": False,
}
BRAIN_JOB_HANDLERS = TEST_KINDS
BRAIN_JOB_HEARTBEAT_SECONDS = 1
ANTHROPIC_API_KEY = ""
