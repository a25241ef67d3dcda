from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Staff users and the API keys harnesses call the brain with (SPEC §8)."""

    name = "accounts"
    verbose_name = "Accounts and API keys"
