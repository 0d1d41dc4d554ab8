"""Job glue, one module per command: set-up, files, progress, reports.

A ``shaper`` command is three parts: ``cli/<command>.py`` parses the options (the shared
vocabulary of :mod:`shaper.cli.common`), ``jobs/<command>.py`` runs the job (builds the
parties' sessions, reads and writes files, shows progress, writes the report), and the
protocol steps and models it calls live in :mod:`shaper.protocols` and :mod:`shaper.ml`, which
never print, never read files a user names and never know which command called them.
Benchmarks may call a job to time it end to end.
"""
