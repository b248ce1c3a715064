"""tinterval.py: the mean of a few values with its 95% Student t half-width, shared by scale_summary.py and
probe_table.py (seeds are few: 2 to 10)."""
import math
import statistics

T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}  # two-sided, by df


def mean_ci(xs):
    """(mean, half-width of its 95% t interval); half-width None for one value."""
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, None
    return m, T95.get(len(xs) - 1, 1.96) * statistics.stdev(xs) / math.sqrt(len(xs))
