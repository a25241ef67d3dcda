"""Settings for the brain, read from environment variables (SPEC §1).

Every knob is an environment variable with a typed helper that fails loudly on a bad
value. With ``DATABASE_URL`` unset the site runs on the embedded PostgreSQL
(``gbrain_site.embedded_db``); with it set, on that server.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


# --- typed environment helpers ---------------------------------------------------


def env_str(name: str, default: str = "") -> str:
    """Return the variable's value, or ``default`` when unset or empty."""
    return os.environ.get(name) or default


def env_bool(name: str, *, default: bool) -> bool:
    """Parse ``1/0, true/false, yes/no, on/off``; anything else raises."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1 or 0)")


def env_int(name: str, default: int) -> int:
    """Parse an integer; a non-integer value raises ``ImproperlyConfigured``."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from exc


def env_float(name: str, default: float) -> float:
    """Parse a float; a non-number raises ``ImproperlyConfigured``."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from exc


def env_secret(name: str, default: str = "") -> str:
    """Read a secret from ``NAME`` or from the file named by ``NAME_FILE``."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path!r}: {exc}") from exc
    return os.environ.get(name) or default


def env_choice(name: str, choices: tuple[str, ...], default: str) -> str:
    """Return one of ``choices``; any other value raises ``ImproperlyConfigured``."""
    value = env_str(name, default).strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r}: expected one of {choices}")
    return value


# --- core --------------------------------------------------------------------------

DEBUG = env_bool("DJANGO_DEBUG", default=False)
# A development default keeps the two README commands working on a fresh clone; the
# deploy check ``brain.E001`` refuses it whenever DEBUG is off on a real server, and a
# deployment that says ``DJANGO_DEBUG=0`` does not start without a real secret.
INSECURE_DEV_SECRET = "dev-only-insecure-secret-key-change-me"  # noqa: S105
SECRET_KEY = env_secret("DJANGO_SECRET_KEY", INSECURE_DEV_SECRET)
if (
    os.environ.get("DJANGO_DEBUG", "") != ""
    and not DEBUG
    and SECRET_KEY in ("", INSECURE_DEV_SECRET)
):
    raise ImproperlyConfigured(
        "DJANGO_DEBUG=0 (production) needs a real DJANGO_SECRET_KEY (or "
        "DJANGO_SECRET_KEY_FILE); refusing to start with the public development secret."
    )
ALLOWED_HOSTS = [
    h.strip()
    for h in env_str(
        "DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver"
    ).split(",")
    if h.strip()
]
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in env_str("DJANGO_CSRF_TRUSTED_ORIGINS").split(",") if o.strip()
]

# --- HTTPS deployment (all off by default: the README commands serve plain http) ---
# Production behind TLS: DJANGO_SECURE_HSTS_SECONDS=31536000,
# DJANGO_SECURE_SSL_REDIRECT=1, DJANGO_SECURE_COOKIES=1, and behind a proxy that
# terminates TLS DJANGO_SECURE_PROXY_SSL_HEADER=1 (trusts X-Forwarded-Proto).
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool(
    "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=SECURE_HSTS_SECONDS > 0
)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", default=False)
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", default=False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool(
    "DJANGO_SECURE_COOKIES", default=False
)
if env_bool("DJANGO_SECURE_PROXY_SSL_HEADER", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

INSTALLED_APPS = [
    # django.contrib.admin with the curation console as admin.site.
    "interfaces.console.apps.ConsoleAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_q",
    "social_django",
    # Serves the Swagger UI files of /api/docs from the package (works offline).
    "ninja",
    "accounts",
    "brain",
    "loops",
    "connectors",
    "jobs",
    "interfaces",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Outermost for /api/: every error answer leaves as the SPEC §4 envelope.
]
MIDDLEWARE.insert(0, "gbrain_site.middleware.api_error_envelope")
# No web request loads the embedding model (it loads once per process, at startup).
MIDDLEWARE.append("gbrain_site.middleware.embeddings_outside_requests")
# The admin and console answer a NUL in a form or query string 400, not 500.
MIDDLEWARE.append("gbrain_site.middleware.refuse_nul_in_forms")

ROOT_URLCONF = "gbrain_site.urls"
WSGI_APPLICATION = "gbrain_site.wsgi.application"
ASGI_APPLICATION = "gbrain_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "social_django.context_processors.backends",
            ],
        },
    },
]

# --- database (SPEC §1) -------------------------------------------------------------

# Files that belong to one brain (the embedded database, the demo's admin password,
# logs, locks) live under BRAIN_DATA_DIR (default: var/ in the checkout).
BRAIN_DATA_DIR = Path(env_str("BRAIN_DATA_DIR") or BASE_DIR / "var")
BRAIN_EMBEDDED_DB = not env_str("DATABASE_URL")
# The nightly backup job (jobs.backup): where archives go, how many are kept.
BRAIN_BACKUP_DIR = Path(env_str("BRAIN_BACKUP_DIR") or BRAIN_DATA_DIR / "backups")
BRAIN_BACKUP_KEEP = env_int("BRAIN_BACKUP_KEEP", 7)
# brain_ask (brain.services.ask): kill switch and daily spend cap in USD.
BRAIN_ASK_ENABLED = env_bool("BRAIN_ASK_ENABLED", default=True)
BRAIN_ASK_MAX_USD_PER_DAY = float(env_str("BRAIN_ASK_MAX_USD_PER_DAY") or "1.00")

DATABASES: dict[str, Any]
if not BRAIN_EMBEDDED_DB:
    import dj_database_url

    DATABASES = {
        "default": dj_database_url.config(conn_max_age=600, conn_health_checks=True)
    }
else:
    from gbrain_site.embedded_db import database_settings

    DATABASES = {"default": database_settings(BASE_DIR)}

# Parameters travel apart from the SQL text (server-side binding): a batch insert of
# mail sends megabytes of text that would otherwise be quoted into the statement
# client-side and parsed back by the server (SPEC §11 ingest rate).
DATABASES["default"].setdefault("OPTIONS", {})["server_side_binding"] = True
# A sequential scan of a big table starts at its first block, not wherever another
# scan of it happens to be (synchronize_seqscans): the keyword arm's bounded set of
# chunks holding a very common word (brain.search, "the first N that match") is then
# the same set on every run, read from the same cached blocks (SPEC §3, §11).
# A statement a connection runs again and again (entity()'s resolve and card, the
# search arms, push's mention lookup) is prepared on the server after
# BRAIN_DB_PREPARE_THRESHOLD runs (psycopg's prepare_threshold; Django's default is
# never): planning those statements took longer than running them (SPEC §11). A
# negative value turns it off (a pooler in transaction mode without prepared
# statement support).
_prepare_threshold = env_int("BRAIN_DB_PREPARE_THRESHOLD", 5)
DATABASES["default"]["OPTIONS"]["prepare_threshold"] = (
    _prepare_threshold if _prepare_threshold >= 0 else None
)
_pg_options = DATABASES["default"]["OPTIONS"].get("options", "")
DATABASES["default"]["OPTIONS"]["options"] = (
    f"{_pg_options} -c synchronize_seqscans=off".strip()
)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "accounts.User"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

AUTHENTICATION_BACKENDS = [
    "social_core.backends.google.GoogleOAuth2",
    "django.contrib.auth.backends.ModelBackend",
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "var" / "static"
LOGIN_URL = "/admin/login/"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("BRAIN_LOG_LEVEL", "WARNING")},
}

# --- the brain ----------------------------------------------------------------------

# Shared mailboxes (SPEC §6.1, §6.1a). Stored credentials (an uploaded Workspace
# service-account key, IMAP passwords) are encrypted with Fernet under a key derived
# from BRAIN_SECRETS_KEY (default: the Django SECRET_KEY); rotating it makes them
# unreadable, so set it once. A service-account key may instead stay a file on the
# host: BRAIN_GOOGLE_SERVICE_ACCOUNT_FILE (JSON key with domain-wide delegation).
BRAIN_SECRETS_KEY = env_secret("BRAIN_SECRETS_KEY", "")
BRAIN_GOOGLE_SERVICE_ACCOUNT_FILE = env_str("BRAIN_GOOGLE_SERVICE_ACCOUNT_FILE", "")

# The owner's timezone: due dates are stored at 23:59:59 local (SPEC §5.3) and dream
# runs at 02:00 local (SPEC §7).
BRAIN_TIME_ZONE = env_str("BRAIN_TIME_ZONE", "UTC")
# Full-text configuration for chunk tsvectors (SPEC §3).
BRAIN_FTS_LANGUAGE = env_str("BRAIN_FTS_LANGUAGE", "english")
# Body [[wiki-links]] become relations on every trusted page write (SPEC §2.3;
# GBrain's auto_link). Off only to measure the write path without it.
BRAIN_AUTO_LINK = env_bool("BRAIN_AUTO_LINK", default=True)
# Embedding provider (SPEC §3): local sentence-transformers, an OpenAI-compatible
# endpoint, or none (keyword-only search, ``search_degraded``).
BRAIN_EMBEDDING_PROVIDER = env_choice(
    "BRAIN_EMBEDDING_PROVIDER", ("local", "openai", "none"), "local"
)
BRAIN_EMBEDDING_MODEL = env_str("BRAIN_EMBEDDING_MODEL", "all-MiniLM-L6-v2")
BRAIN_EMBEDDING_DIMENSIONS = env_int("BRAIN_EMBEDDING_DIMENSIONS", 384)
BRAIN_OPENAI_BASE_URL = env_str("BRAIN_OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
BRAIN_OPENAI_API_KEY = env_secret("BRAIN_OPENAI_API_KEY")

# LLM (Anthropic). No key means: synthesize/query answer ``unavailable`` and
# commitment extraction uses the offline rule extractor (SPEC §4, §5.3).
ANTHROPIC_API_KEY = env_secret("ANTHROPIC_API_KEY")
BRAIN_LLM_MODEL = env_str("BRAIN_LLM_MODEL", "claude-sonnet-5")
LOOPS_EXTRACTION_ENABLED = env_bool("LOOPS_EXTRACTION_ENABLED", default=True)
LOOPS_EXTRACTION_MAX_USD_PER_DAY = env_float("LOOPS_EXTRACTION_MAX_USD_PER_DAY", 2.0)
# My own help request posted to a mailing list opens one waiting loop on the list
# (loops.detectors._list_asked), unless a later post of mine on the same topic
# settled it. On the labelled dev set: outbound precision 0.90 -> 0.93, recall
# 0.24 -> 0.70 (benchmarks/loops_quality.py; --no-list-asks for the rule off).
LOOPS_LIST_ASKS = env_bool("LOOPS_LIST_ASKS", default=True)
# The learned decision over loop candidates (SPEC §5.1b; loops/data/decisions.json).
# Off only to measure the rules alone (benchmarks/loops_quality.py does).
LOOPS_DECISIONS_ENABLED = env_bool("LOOPS_DECISIONS_ENABLED", default=True)

# --- Google sign-in and the read-only mailbox grant (SPEC §6.1) ----------------------

SOCIAL_AUTH_GOOGLE_OAUTH2_KEY = env_str("GOOGLE_CLIENT_ID")
SOCIAL_AUTH_GOOGLE_OAUTH2_SECRET = env_secret("GOOGLE_CLIENT_SECRET")
SOCIAL_AUTH_GOOGLE_OAUTH2_SCOPE = [
    "openid",
    "email",
    "https://www.googleapis.com/auth/gmail.readonly",
    "https://www.googleapis.com/auth/calendar.readonly",
    "https://www.googleapis.com/auth/contacts.readonly",
]
SOCIAL_AUTH_GOOGLE_OAUTH2_AUTH_EXTRA_ARGUMENTS = {
    "access_type": "offline",
    "prompt": "consent",
    "include_granted_scopes": "true",
}
SOCIAL_AUTH_JSONFIELD_ENABLED = True
SOCIAL_AUTH_LOGIN_REDIRECT_URL = "/admin/"
# Tokens never reach logs; social-auth stores them in UserSocialAuth.extra_data.
SOCIAL_AUTH_PROTECTED_USER_FIELDS = ["email", "first_name", "last_name"]
# social-auth's default steps, then: a grant with mailbox scopes connects the account
# as a ``google`` Source (owner addresses = account + Gmail send-as aliases).
SOCIAL_AUTH_PIPELINE = (
    "social_core.pipeline.social_auth.social_details",
    "social_core.pipeline.social_auth.social_names",
    "social_core.pipeline.social_auth.social_uid",
    "social_core.pipeline.social_auth.auth_allowed",
    "social_core.pipeline.social_auth.social_user",
    "social_core.pipeline.user.get_username",
    "social_core.pipeline.user.create_user",
    "social_core.pipeline.social_auth.associate_user",
    "social_core.pipeline.social_auth.load_extra_data",
    "social_core.pipeline.user.user_details",
    "connectors.google.auth.connect_google_source",
)

# --- jobs (SPEC §7) -----------------------------------------------------------------

# A running job's worker beats every BRAIN_JOB_HEARTBEAT_SECONDS; the reaper (every
# minute) re-queues a job whose last beat is older than BRAIN_JOB_STALL_SECONDS.
BRAIN_JOB_HEARTBEAT_SECONDS = env_int("BRAIN_JOB_HEARTBEAT_SECONDS", 10)
BRAIN_JOB_STALL_SECONDS = env_int("BRAIN_JOB_STALL_SECONDS", 120)
# Retries: BACKOFF × 2^(attempt−1), capped, ± JITTER of itself.
BRAIN_JOB_BACKOFF_SECONDS = env_int("BRAIN_JOB_BACKOFF_SECONDS", 30)
BRAIN_JOB_BACKOFF_MAX_SECONDS = env_int("BRAIN_JOB_BACKOFF_MAX_SECONDS", 3600)
BRAIN_JOB_BACKOFF_JITTER = env_float("BRAIN_JOB_BACKOFF_JITTER", 0.2)
# A queued job whose task was sent this long ago and is still unclaimed is sent again.
BRAIN_JOB_REDISPATCH_SECONDS = env_int("BRAIN_JOB_REDISPATCH_SECONDS", 900)
# Extra job kinds {kind: "dotted.path.to.handler"} (tests register test-only kinds).
BRAIN_JOB_HANDLERS: dict[str, Any] = {}
# Dream (SPEC §10): LLM spend cap per run (USD); 0 skips the LLM phases.
BRAIN_DREAM_BUDGET_USD = env_float("BRAIN_DREAM_BUDGET_USD", 0.5)
# Rows each dream phase handles per run; the rest waits for the next night.
BRAIN_DREAM_MAX_ITEMS = env_int("BRAIN_DREAM_MAX_ITEMS", 1000)
# pg_trgm title similarity from which two entity pages are proposed for merging.
BRAIN_DREAM_NAME_SIMILARITY = env_float("BRAIN_DREAM_NAME_SIMILARITY", 0.75)
# Soft-deleted pages are purged this many hours after deletion (SPEC §10).
BRAIN_DREAM_PURGE_AFTER_HOURS = env_int("BRAIN_DREAM_PURGE_AFTER_HOURS", 72)
# Dream's synthesis phase summarises conversations changed in this many hours.
BRAIN_DREAM_LOOKBACK_HOURS = env_int("BRAIN_DREAM_LOOKBACK_HOURS", 24)
# At most this many conversation syntheses per dream run (LLM calls).
BRAIN_DREAM_LLM_MAX_ITEMS = env_int("BRAIN_DREAM_LLM_MAX_ITEMS", 20)

# timeout < retry so a task is never handed to a second worker while the first runs;
# durable retries are the Job row's business (jobs.services), not django-q2's.
Q_CLUSTER = {
    "name": "brain",
    "workers": env_int("BRAIN_Q_WORKERS", 2),
    "timeout": env_int("BRAIN_Q_TIMEOUT", 3600),
    "retry": env_int("BRAIN_Q_TIMEOUT", 3600) + 600,
    "max_attempts": 1,
    "orm": "default",
    # A missed night or sync tick runs once, not once per missed slot.
    "catch_up": False,
    # Cron schedules (dream at 02:00) are read in the brain's timezone.
    "time_zone": BRAIN_TIME_ZONE,
    "ack_failures": True,
    "save_limit": 1000,
    "poll": 1,
    "label": "Django Q2",
}
if env_str("REDIS_URL"):
    Q_CLUSTER["redis"] = env_str("REDIS_URL")
    Q_CLUSTER.pop("orm")
