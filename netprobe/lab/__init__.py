"""Emulated routes for demos and tests: namespaces plus an impairment relay (`netprobe lab`).

The library surface is netprobe.lab.api (up, down, set_impairments, current, LabState, RouteInfo).
"""
