"""What the benchmarks (`benchmarks/`) share with each other and with their tests.

Clients, servers, cells and their rounds, the statistics and the printed
reports, and the probes that read a server's CPU from outside. Benchmarks
import this package; tests import it too, and never a benchmark.
"""
