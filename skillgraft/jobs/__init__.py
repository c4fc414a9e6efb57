"""What the long commands do, as functions over typed option objects.

A CLI command builds the options from its flags, calls the job and shows what comes back; the
job raises JobError with the exit code the command ends with. Nothing here prints.
"""
