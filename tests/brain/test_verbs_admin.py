"""STYLE rule 21: the fact admin's "forget selected facts" action calls fact_forget."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import User
from brain.models import AuditEvent, Fact
from tests.factories import FactFactory, SourceFactory

pytestmark = pytest.mark.django_db


def test_forget_selected_facts_expires_them_with_an_audit_row() -> None:
    user = User.objects.create_superuser("curator", "curator@example.org", "pw")
    client = Client()
    client.force_login(user)
    source = SourceFactory(id="admin-src")
    facts = [FactFactory(source=source), FactFactory(source=source)]
    response = client.post(
        "/admin/brain/fact/",
        {"action": "forget_facts", "_selected_action": [str(f.pk) for f in facts]},
        follow=True,
    )
    assert response.status_code == 200
    assert "2 fact(s) forgotten." in response.content.decode()
    assert Fact.objects.filter(expired_at__isnull=False).count() == 2
    assert set(
        AuditEvent.objects.filter(action="fact_forgotten").values_list(
            "actor", flat=True
        )
    ) == {"user:curator"}
    assert (
        Fact.objects.filter(expired_reason="forgotten: forgotten in the admin").count()
        == 2
    )
