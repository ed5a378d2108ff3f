"""How Django writes dates and times on the console's pages (settings.FORMAT_MODULE_PATH): to the
second, in one order, the time zone stated: "2026-12-02 09:15:03 UTC". Django's English formats
("Dec. 2, 2026, 9:15 a.m.") would otherwise win over settings.DATETIME_FORMAT. Input formats
stay Django's."""

DATETIME_FORMAT = "Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = DATETIME_FORMAT
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = DATE_FORMAT
TIME_FORMAT = "H:i:s"
