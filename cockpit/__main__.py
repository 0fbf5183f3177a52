from cockpit.cli.main import main

raise SystemExit(main())
