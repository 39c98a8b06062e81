"""A particle simulation shaped like real Warp programs: steps with substeps, ping-pong state buffers,
a ``wp.ScopedTimer`` per phase, a reduction, an occasional readback, and buffers labelled with
:func:`launchtrace.own`.

Each step runs inside ``launchtrace.scope("step", step=i)``, so each step is its own trace; the substep loop
repeats the same launch sequence with the state buffers swapped (period 2), which the exporter folds.

Example::

    from launchtrace.demo.particles import ParticleSim
    sim = ParticleSim(num_particles=256, device="cpu")
    sim.run(steps=10)
"""

from __future__ import annotations

import numpy as np
import warp as wp

import launchtrace

__all__ = ["ParticleSim"]


@wp.kernel
def apply_forces(
    vel: wp.array(dtype=wp.vec3), force: wp.array(dtype=wp.vec3), gravity: wp.vec3, drag: float, dt: float
):
    i = wp.tid()
    v = vel[i]
    vel[i] = v + (gravity + force[i] - v * drag) * dt


@wp.kernel
def integrate(
    pos_in: wp.array(dtype=wp.vec3),
    vel: wp.array(dtype=wp.vec3),
    pos_out: wp.array(dtype=wp.vec3),
    dt: float,
):
    i = wp.tid()
    pos_out[i] = pos_in[i] + vel[i] * dt


@wp.kernel
def collide_ground(pos: wp.array(dtype=wp.vec3), vel: wp.array(dtype=wp.vec3), restitution: float):
    i = wp.tid()
    p = pos[i]
    if p[1] < 0.0:
        pos[i] = wp.vec3(p[0], 0.0, p[2])
        v = vel[i]
        vel[i] = wp.vec3(v[0], -v[1] * restitution, v[2])


@wp.kernel
def kinetic_energy(vel: wp.array(dtype=wp.vec3), mass: float, energy: wp.array(dtype=float)):
    i = wp.tid()
    v = vel[i]
    wp.atomic_add(energy, 0, 0.5 * mass * wp.dot(v, v))


class _State:
    def __init__(self, pos: wp.array, vel: wp.array) -> None:
        self.pos = pos
        self.vel = vel


class ParticleSim:
    """Particles falling under gravity and drag, bouncing on the ground plane."""

    def __init__(self, num_particles: int = 1024, substeps: int = 4, device: str = "cpu", seed: int = 42) -> None:
        rng = np.random.default_rng(seed)
        self.device = device
        self.n = num_particles
        self.substeps = substeps
        self.dt = 1.0 / 60.0
        pos = rng.random((num_particles, 3), dtype=np.float32) * np.float32(2.0) + np.float32([0.0, 1.0, 0.0])
        vel = (rng.random((num_particles, 3), dtype=np.float32) - np.float32(0.5)) * np.float32(0.1)
        self.states = [
            _State(wp.array(pos, dtype=wp.vec3, device=device), wp.array(vel, dtype=wp.vec3, device=device)),
            _State(
                wp.zeros(num_particles, dtype=wp.vec3, device=device),
                wp.zeros(num_particles, dtype=wp.vec3, device=device),
            ),
        ]
        self.force = wp.zeros(num_particles, dtype=wp.vec3, device=device)
        self.energy = wp.zeros(1, dtype=float, device=device)
        self.energies: list[float] = []
        launchtrace.own(self, "sim")

    def substep(self, src: _State, dst: _State) -> None:
        dt = self.dt / self.substeps
        wp.copy(dst.vel, src.vel)
        wp.launch(
            apply_forces,
            dim=self.n,
            inputs=[dst.vel, self.force, wp.vec3(0.0, -9.81, 0.0), 0.1, dt],
            device=self.device,
        )
        wp.launch(integrate, dim=self.n, inputs=[src.pos, dst.vel, dst.pos, dt], device=self.device)
        wp.launch(collide_ground, dim=self.n, inputs=[dst.pos, dst.vel, 0.5], device=self.device)

    def step(self, index: int) -> None:
        with launchtrace.scope("step", step=index):
            with wp.ScopedTimer("simulate", print=False):
                for k in range(self.substeps):
                    src, dst = self.states[k % 2], self.states[(k + 1) % 2]
                    self.substep(src, dst)
                if self.substeps % 2:
                    self.states.reverse()
            with wp.ScopedTimer("diagnostics", print=False):
                self.energy.zero_()
                wp.launch(kinetic_energy, dim=self.n, inputs=[self.states[0].vel, 1.0, self.energy], device=self.device)
                if index % 10 == 0:
                    self.energies.append(float(self.energy.numpy()[0]))

    def run(self, steps: int = 60) -> list[float]:
        for i in range(steps):
            self.step(i)
        return self.energies
