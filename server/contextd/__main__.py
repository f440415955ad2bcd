from contextd.cli import main

main()
