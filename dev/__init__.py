"""Developer tooling: the local stack's clients (dev.kit), benchmarks and the soak test."""
