"""Sandboxes: one interface (base.py), backends local (bubblewrap), docker, modal."""
