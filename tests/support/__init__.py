"""Test and benchmark helpers (not shipped): a real llama.cpp server, a fixed-latency mock, a fault proxy,
a hostile OpenAI-compatible server."""

from tests.support.servers import (
    ALL_FAULTS,
    DEFAULT_FAULTS,
    ServerHandle,
    free_port,
    start_fault_proxy,
    start_hostile_server,
    start_llama_server,
    start_mock_server,
)

__all__ = [
    "ALL_FAULTS",
    "DEFAULT_FAULTS",
    "ServerHandle",
    "free_port",
    "start_fault_proxy",
    "start_hostile_server",
    "start_llama_server",
    "start_mock_server",
]
