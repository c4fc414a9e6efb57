"""SkillWorld: a CPU-scale world of generated repository tasks in families of planted bugs,
a recipe skill per family, a scripted expert, and a tiny policy trained from scratch on it.

It exists so that what a skill adds (in context or compiled into weights) can be measured on
this machine end to end: real sandboxes, real tests, a real (small) transformer.
"""
