# SPDX-License-Identifier: MIT
"""One timing definition for every system: percentiles as mori-a2a's, time statistics, bandwidths."""
import math


def percentile(sorted_values, q):
    """Linear interpolation between closest ranks (numpy's 'linear'; mori-a2a's time_stats): pos = q*(n-1)."""
    n = len(sorted_values)
    if n == 0:
        return None
    pos = q * (n - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def time_stats(us):
    """{min, p50, p95, max, mean} of a list of per-iteration microseconds."""
    v = sorted(float(x) for x in us)
    if not v:
        raise ValueError("no samples")
    return {"min": v[0], "p50": percentile(v, 0.5), "p95": percentile(v, 0.95), "max": v[-1],
            "mean": sum(v) / len(v)}


def bandwidths(world, chunk_bytes, t_us):
    """GB/s (1e9 bytes/s) of one all-to-all of `chunk_bytes` per peer taking t_us microseconds."""
    w, c = float(world), float(chunk_bytes)
    if not t_us or t_us <= 0:
        return {"agg_bw_gbps": None, "total_bw_gbps": None, "algbw_gbps": None, "busbw_gbps": None}
    t = t_us * 1e-6
    algbw = w * c / t / 1e9
    return {"agg_bw_gbps": w * (w - 1) * c / t / 1e9, "total_bw_gbps": w * w * c / t / 1e9, "algbw_gbps": algbw,
            "busbw_gbps": algbw * (w - 1) / w}


def failed_fields(world, chunk_bytes, msg):
    """The measurement fields of a row whose system failed: no samples, no time, no bandwidth, the error."""
    return {"iters": 0, "samples": 0, "time_us": {"min": None, "p50": None, "p95": None, "max": None, "mean": None},
            **bandwidths(world, chunk_bytes, None), "wrong": 0, "error": msg}
