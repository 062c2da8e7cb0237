from ylink_data.cli import main

raise SystemExit(main())
