from slurmdoc.cli import main

main()
