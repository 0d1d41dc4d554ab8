"""Moving bytes between parties: TLS channels, sessions, the local launcher, shaping, statistics.

``net`` never knows what it carries: protocols hand it numpy arrays, bytes and small JSON values.

Entry points: :class:`Session` (``Session.from_config(parties_file, me=...)``), :func:`launch`
(n local processes over loopback TLS), :func:`run_in_memory` (n threads, for tests),
:class:`NetConfig`, :func:`load_parties`, :func:`make_identity` (a party's own key and certificate,
whose fingerprint the parties file pins), :func:`make_certificates` (a CA and every party's key on
one machine: ``--local`` runs and tests), :func:`pipeline`.
"""

from .config import (
    NetConfig,
    PartiesFile,
    Party,
    load_parties,
    parse_duration,
    parse_rate,
    parse_size,
)
from .launch import launch, run_in_memory
from .pipeline import PipelineReport, pipeline
from .session import Session
from .stats import Stats
from .tls import Identity, TLSFiles, make_certificates, make_identity, tls_files_for

__all__ = [
    "Identity",
    "NetConfig",
    "PartiesFile",
    "Party",
    "PipelineReport",
    "Session",
    "Stats",
    "TLSFiles",
    "launch",
    "load_parties",
    "make_certificates",
    "make_identity",
    "parse_duration",
    "parse_rate",
    "parse_size",
    "pipeline",
    "run_in_memory",
    "tls_files_for",
]
