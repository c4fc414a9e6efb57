"""Isolated execution of shell commands: Docker and bubblewrap backends behind one protocol."""
