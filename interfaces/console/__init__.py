"""The curation console (SPEC §0 "team admins"): the Django admin, branded, with a
dashboard home and real pages where a form is the wrong tool (loop triage, person
cards, wiki pages with revisions, merges). Every write calls a domain service."""
