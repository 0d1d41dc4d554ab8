import pytest

from shaper.net import launch, run_in_memory


@pytest.fixture(params=["memory", "tls"])
def runner(request):
    """Run a job over the in-memory transport (threads) or as processes over loopback TLS."""
    if request.param == "memory":
        def run(n, fn, *args, **kwargs):
            return run_in_memory(n, fn, *args, **kwargs)
    else:
        def run(n, fn, *args, **kwargs):
            return launch(n, fn, *args, timeout=kwargs.pop("timeout", 120), **kwargs)
    run.transport = request.param
    return run
