from mam.entry import main

main()
