"""The brain's MCP server (SPEC §4, §8): memory verbs, page, loop and push tools for
agent harnesses, on the official ``mcp`` SDK.

- ``tools``: the registry, one ``ToolSpec`` per tool name, each a thin call into the
  same services the HTTP API uses, and the three surfaces (``verbs`` ⊆ ``starter`` ⊆
  ``full``).
- ``server``: ``build_server(surface=, resolve_caller=)`` builds an ``MCPServer``
  holding exactly the surface's tools; every failure comes back as an MCP tool error
  whose text is the SPEC §4 envelope.
- ``http``: the streamable HTTP transport at ``/mcp`` (bearer API keys), mounted by
  ``gbrain_site.asgi``. The stdio transport is ``manage.py mcp``.
"""
