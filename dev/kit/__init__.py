"""Clients of the local stack (`dev/stack up`), shared by the tests and the developer scripts
(benchmarks, soak), so that no script imports from tests/."""
