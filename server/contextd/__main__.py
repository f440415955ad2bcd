from contextd.commands.main import main

main()
