from dbspark.cli.main import main

main()
