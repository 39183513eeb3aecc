from loope.cli.main import main

main()
