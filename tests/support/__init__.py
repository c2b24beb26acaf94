"""Test-only helpers, imported by test modules (which never import each other). Clients of the
local stack that developer scripts need too live in dev.kit."""
