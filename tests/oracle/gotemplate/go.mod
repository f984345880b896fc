module syncbus.test/oracle/gotemplate

go 1.19
