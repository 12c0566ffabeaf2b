"""Ahead-of-time compilation of generated Triton kernels for GPU targets, on any machine.

A *target* (``sm_80``, ``sm_90`` ...) is the GPU a kernel is planned and compiled for; it is apart
from the *device* the run executes on. :mod:`.targets` parses targets and holds each architecture's
per-SM limits (occupancy); :mod:`.plan` plans a fusion region's kernel for a target (the Triton
generator's CUDA plan); :mod:`.worker` compiles one kernel with Triton's CUDA backend in a worker
process and reads its stages, resources and instruction mix; :mod:`.machine_code` parses the stages
(line information, SASS instructions) without torch or Triton; :mod:`.pool` runs the workers while
the user's script runs and reports each finished build to the compile observer.
"""
