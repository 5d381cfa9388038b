# Written by `mix hrw.native.checksum DIR`: the SHA-256 of every precompiled hrw NIF
# archive. The compile task installs only an archive whose digest is listed here.
%{}
