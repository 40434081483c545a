from mam.cli import main

main()
