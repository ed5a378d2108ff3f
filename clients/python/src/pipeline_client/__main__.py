from pipeline_client.cli import main

raise SystemExit(main())
