from skillgraft.cli import app

app()
