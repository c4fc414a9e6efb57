from skillgraft.cli import main

main()
